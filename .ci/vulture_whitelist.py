"""Names vulture (the dead-code gate, `make lint`) cannot see used, each with its reason on its line.

A name belongs here only when something vulture does not read uses it: a library calling a hook by
name, serialization, a module vulture excludes (pyproject.toml), or the engine's documented API.
A name only the tests read does not belong in the product: the tests observe its behaviour through
public results and metrics instead.
"""
# ruff: noqa: B018, F821

_.settings_customise_sources  # pydantic-settings calls this hook by name (worker/config/settings.py)
settings_cls  # the hook's parameters, passed by name
dotenv_settings  # the hook's parameters, passed by name
env_settings  # the hook's parameters, passed by name
file_secret_settings  # the hook's parameters, passed by name

raw_chars  # worker/digest/compact.py: a field of the typed result, read through dataclasses.asdict
compact_chars  # worker/digest/compact.py: a field of the typed result, read through dataclasses.asdict
raw_templates  # worker/digest/templates.py: a field of the typed result, read through dataclasses.asdict

__getattr__  # worker/engine/__init__.py: the package's lazy exports (PEP 562), called by the import system

attention_mask  # Hugging Face's attention-function signature: passed by name (worker/engine/attention.py)
dropout  # Hugging Face's attention-function signature: passed by name (worker/engine/attention.py)
_._compiled_call_impl  # torch.nn.Module's compiled forward, read by torch (worker/engine/fuse.py)
_.forward  # torch.nn.Module.forward, called by Module.__call__ (worker/engine/fp8.py, merge.py)
_.pre_tokenizer  # tokenizers' Tokenizer, read by the Rust backend (worker/engine/tiny.py)
_.decoder  # tokenizers' Tokenizer, read by the Rust backend (worker/engine/tiny.py)
_.encode_special_tokens  # tokenizers' Tokenizer, read by the Rust backend (worker/digest/prepared.py)


daemon_threads  # socketserver reads this class attribute (worker/observability/http.py)
allow_reuse_address  # socketserver reads this class attribute (worker/observability/http.py)
request_queue_size  # socketserver reads this class attribute (worker/observability/http.py)
address_family  # socketserver reads this class attribute (worker/observability/http.py)
_.handle_error  # socketserver calls this hook (worker/observability/http.py)
_.log_message  # http.server calls this hook (worker/observability/http.py)

too_deep  # worker/messages/jsonwalk.py: called by worker/messages/models.py, which vulture excludes
is_export  # worker/messages/otlp.py: called by worker/messages/models.py, which vulture excludes
from_proto  # worker/messages/otlp.py: called by worker/messages/models.py, which vulture excludes

document_fields  # worker/messages/shippers.py: called from worker/messages/models.py, a module vulture excludes
_.help  # worker/cli/ops.py: argparse reads an action's help text when it prints --help
