"""The shared bearer-token check (serve_apps/auth.py) and the reference pre-checks: pure functions, no Ray."""

from drkernel.verify.static.reference_source import one_line, reference_problem
from serve_apps.auth import client_of, tokens_from_env


def test_tokens_are_compared_as_bytes_and_name_the_client(monkeypatch):
    monkeypatch.setenv("TOK", " alpha, beta ,")
    tokens = tokens_from_env("TOK")
    assert tokens == ("alpha", "beta")
    assert client_of(b"Bearer alpha", tokens) == 0 and client_of("bearer  beta ", tokens) == 1
    for bad in (None, b"", b"Bearer", b"Basic alpha", b"Bearer alph", "Bearer \u00fc\u00df", b"Bearer \xff\xfe"):
        assert client_of(bad, tokens) is None, bad
    monkeypatch.setenv("TOK", " , ")
    assert tokens_from_env("TOK") is None


def test_reference_problems_are_found_statically_in_one_line():
    good = (
        "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\n"
        "def get_init_inputs():\n    return []\n"
    )
    assert reference_problem(good, "Model") is None
    assert "no Net" in reference_problem(good, "Net")
    assert "no get_inputs" in reference_problem(good.replace("def get_inputs", "def get_inputz"), "Model")
    assert reference_problem("def f(:\n", "Model").startswith("reference does not parse")
    assert reference_problem("x = 1\0", "Model").startswith("reference does not parse")
    assert (
        one_line('reference failed: E: x\n  File "/tmp/drkernel-verify-1/reference/reference.py", line 2')
        == "reference failed: E: x"
    )
    assert one_line("bad (/tmp/drkernel-verify-ab/reference/reference.py, line 2)") == "bad (reference.py, line 2)"
