// `mrcheck-prolog admin-collect ...`: the per-node, per-step root collector the SPANK plugin starts for
// admin_comment= and report_dir=. See admin_collect.cpp for the protocol.
#pragma once

namespace mrcheck::prolog {

// argv: the arguments after "admin-collect" (pairs of --key value). Exit 0 done, 1 could not deliver or
// write, 2 bad arguments. Logs to fd 4 (slurmstepd reads it), never to stdout/stderr.
int admin_collect_main(int argc, char** argv);

}  // namespace mrcheck::prolog
