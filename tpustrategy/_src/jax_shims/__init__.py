"""Private JAX / jaxlib names, one shim module per concern, each with its public alternative."""
