"""Names vulture (the dead-code gate, `make lint`) cannot see used: each is read by a library, by
serialization, or by the tests and users as documented API. Add a name here only with its reason."""
# ruff: noqa: B018, F821

# pydantic-settings calls this hook with these arguments by name.
_.settings_customise_sources
settings_cls
dotenv_settings
env_settings
file_secret_settings

# Fields of typed results read through dataclasses.asdict / JSON (logs, benchmarks, the tests).
raw_chars  # worker/digest/compact.py
compact_chars
raw_templates  # worker/digest/templates.py
finish_reason  # worker/engine/engine.py: Generated, part of the engine's API
_.profiling_enabled  # bench/digest.py: Drain3's config
_.drain_depth  # worker/bench/drain_tuned.py: Drain3's config, read by Drain3
_.drain_sim_th
_.mask_prefix
_.mask_suffix
_.masking_instructions

# Module __getattr__ (PEP 562): the engine package's lazy exports.
__getattr__

# Hugging Face's attention-function signature: the arguments are passed by name.
attention_mask
dropout
_._compiled_call_impl  # torch.nn.Module's compiled forward (worker/engine/fuse.py)
_.forward  # torch.nn.Module
_.pre_tokenizer  # tokenizers' Tokenizer, set by attribute (worker/engine/tiny.py)
_.decoder

# The engine's public API (worker/engine/__init__.py), used by the tests.
_.copied
_.budget_weight

# The numpy reference of the C++ robust z, held to it by a property test (worker/digest/outliers.py).
line_outlier_z

# socketserver / wsgiref hooks and class attributes (worker/observability/http.py).
daemon_threads
allow_reuse_address
request_queue_size
_.handle_error
request
address_family
_.log_message

# Read by the tests: what the decoder and the spill file do (worker/messages/models.py is excluded above).
too_deep  # worker/messages/jsonwalk.py, called by worker/messages/models.py
is_export  # worker/messages/otlp.py, called by worker/messages/models.py
from_proto  # worker/messages/otlp.py, called by worker/messages/models.py
document_fields  # worker/messages/shippers.py, called by worker/messages/models.py
_.in_memory  # worker/pipeline/spill.py: values kept in memory after a disk failure
_.file_bytes  # worker/pipeline/spill.py: the spill file's size
StepResult.decode_rows  # worker/engine/continuous.py: rows decoded in a step (tests, benchmarks)
SlotAllocator.largest_free  # worker/engine/slots.py: the largest free interval (tests)
_.encode_special_tokens  # tokenizers.Tokenizer: read by the Rust backend (special tokens split as text)
