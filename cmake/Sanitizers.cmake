# ASan+UBSan for the test build only: the shipped plugin must never carry a sanitizer runtime into slurmstepd.
if(MRCHECK_SANITIZE)
  set(mrcheck_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${mrcheck_sanitize_flags})
  add_link_options(${mrcheck_sanitize_flags})
endif()
