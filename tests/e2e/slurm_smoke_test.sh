#!/bin/bash
# The local Slurm does what every other end-to-end test relies on (tests/slurm/smoke-test.sh).
source "$(dirname "$0")/lib.sh"
e2e_slurm_up
bash "$MRCHECK_SOURCE_DIR/tests/slurm/smoke-test.sh" "$MRCHECK_SLURM_DIR"
