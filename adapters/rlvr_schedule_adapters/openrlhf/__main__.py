"""``python -m rlvr_schedule_adapters.openrlhf --schedule FILE [--advisory] <openrlhf args>``."""

from rlvr_schedule_adapters.openrlhf.launch import main

main()
