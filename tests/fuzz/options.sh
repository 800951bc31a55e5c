# Sourced by run.sh and long.sh: the libFuzzer options every run of a target uses.
# Inputs longer than the parser ever sees in practice only slow the search down; a few parsers have caps of
# their own (1 KiB MRCHECK_SUBMIT, 128 B --mr-check, 8 KiB node records) that the length must reach past.
max_len_for() {
  case $1 in
    parse_bytes|parse_duration|rlimit_memlock|dotted_version|nccl_ib_hca) echo 512 ;;
    check_groups|mr_check_request|escape_line) echo 1024 ;;
    submit_record|memlock_env|proc_stat) echo 2048 ;;
    nccl_line) echo 4096 ;;
    admin_record) echo 20000 ;;
    nccl_scanner|nccl_probe_log|nccl_explain) echo 32768 ;;
    *) echo 8192 ;;
  esac
}
# 2 GiB RSS (a single allocation past it is a finding too), 10 s per input.
mrcheck_fuzz_common_args=(-rss_limit_mb=2048 -timeout=10 -print_final_stats=1)
# Any of these in a log is a failure even when the exit status is 0.
mrcheck_fuzz_failure_re='ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|==ERROR'
