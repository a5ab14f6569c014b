"""``python -m rewardstream``: the ``rewardstream`` command, where no console script is installed
(``torchrun -m rewardstream train``, services started by a parent process)."""

from rewardstream.cli import main

main()
