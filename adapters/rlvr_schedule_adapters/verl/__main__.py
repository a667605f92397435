"""``python -m rlvr_schedule_adapters.verl --schedule FILE [--advisory] <verl Hydra overrides>``."""

from rlvr_schedule_adapters._common import require_framework

require_framework("verl")  # exit 2 naming the extra where verl (or Hydra) is not installed

from rlvr_schedule_adapters.verl.launch import main  # noqa: E402

raise SystemExit(main())
