# ASan+UBSan for the test build only: the shipped plugin must never carry a sanitizer runtime into slurmstepd.
if(MRCHECK_SANITIZE)
  set(mrcheck_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${mrcheck_sanitize_flags})
  add_link_options(${mrcheck_sanitize_flags})
endif()
# A fuzz build (tests/fuzz, clang, with the sanitizers) instruments the core's layers for libFuzzer's coverage,
# so its fuzz targets and unit tests link one build of the core (src/CMakeLists.txt, prolog/CMakeLists.txt).
set(MRCHECK_FUZZ_FLAGS "")
if(MRCHECK_SANITIZE AND MRCHECK_BUILD_FUZZ AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(MRCHECK_FUZZ_FLAGS -fsanitize=fuzzer-no-link)
endif()
