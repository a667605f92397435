"""OpenRLHF adapter internals. :mod:`.actors` imports OpenRLHF and Ray (needs flash_attn and vllm
importable); the entry-point module :mod:`rlvr_schedule_adapters.openrlhf_plugin` imports neither."""
