"""``python -m rlvr_schedule_adapters.openrlhf --schedule FILE [--advisory] <openrlhf args>``."""

from rlvr_schedule_adapters._common import require_framework

require_framework("openrlhf")  # exit 2 naming the extra where OpenRLHF is not installed

from rlvr_schedule_adapters.openrlhf.launch import main  # noqa: E402

main()
