"""Example parsing: the protobuf wire format (`wire`, the one varint reader) and ``parse_*``."""
