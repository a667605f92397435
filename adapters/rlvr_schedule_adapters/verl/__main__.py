"""``python -m rlvr_schedule_adapters.verl --schedule FILE [--advisory] <verl Hydra overrides>``."""

from rlvr_schedule_adapters.verl.launch import main

raise SystemExit(main())
