"""The misuse audit tool (tools/misuse_audit.py) classifies fresh-process runs correctly; a few
of its cases run here (the whole audit is run by hand: ~95 processes)."""

from __future__ import annotations

import importlib.util
import os

_TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "misuse_audit.py")
_spec = importlib.util.spec_from_file_location("misuse_audit", _TOOL)
audit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit)


def test_the_classifier_names_what_a_message_lacks():
    case = ("c", "", "learning_rate", "fast")
    good = {"outcome": "raised", "type": "TypeError",
            "message": "X: learning_rate must be a float. Received: 'fast'.\nFix: pass 1e-3."}
    assert audit.classify(case, good)["verdict"] == "ok"
    bare = {"outcome": "raised", "type": "TypeError", "message": "bad value"}
    verdict = audit.classify(case, bare)
    assert verdict["verdict"] == "lacking" and len(verdict["missing"]) == 3
    assert audit.classify(case, {"outcome": "returned"})["verdict"] == "silent"
    assert audit.classify(case, {"outcome": "hang"})["verdict"] == "hang"
    assert audit.classify(("r", "", None, None), {"outcome": "wrong", "message": ""})["verdict"] == "silent"


def test_the_cases_have_unique_names_and_there_are_about_ninety():
    names = [c[0] for c in audit.CASES]
    assert len(names) == len(set(names)) and len(names) >= 90


def test_a_few_cases_run_in_fresh_processes_with_clear_errors():
    results = audit.audit(["termination_config_bad_grace", "lookup_bad_default", "optimizer_bad_rho",
                           "ckpt_deferred_append_restores"], jobs=2, timeout=240)
    assert [r["verdict"] for r in results] == ["ok"] * 4, results


def test_a_hanging_case_is_reported_as_a_hang():
    assert audit.run_case("import time\ntime.sleep(60)", timeout=15) == {"outcome": "hang"}
