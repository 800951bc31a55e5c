# fmt, compiled once (src/util/fmt_once.cpp, docs/DESIGN.md, "Why the plugin is two files"): defines mrcheck_fmt, the INTERFACE target
# the base layer links for fmt.
#
# Header-only fmt compiles fmt's whole formatting engine (float formatting included) again in every file
# that formats anything, which was most of the tree's compile time. Linking libfmt.so instead would load it
# into srun, slurmd and slurmstepd with the plugin, and add a dependency EL has only in EPEL. So the base
# layer compiles fmt's definitions once, in one file, and every file includes fmt without FMT_HEADER_ONLY.
# fmt_once.cpp names the templates fmt declares but does not define, which changes between fmt releases:
# a sample program (fmt_once_check.cpp) is linked against it here, and when it does not link this fmt is
# used header-only, as before (slower to build, same program).
option(MRCHECK_FMT_ONCE "Compile fmt's definitions once (src/util/fmt_once.cpp) instead of header-only" ON)

get_target_property(mrcheck_fmt_includes fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
set(mrcheck_fmt_once_ok OFF)
if(MRCHECK_FMT_ONCE)
  # Cached (a whole compile of fmt's engine, most of a reconfigure's time) and asked again when the flags, fmt
  # or either file change (cmake/KeyedCheck.cmake).
  file(SHA256 "${PROJECT_SOURCE_DIR}/src/util/fmt_once.cpp" mrcheck_fmt_once_hash)
  file(SHA256 "${PROJECT_SOURCE_DIR}/cmake/fmt_once_check.cpp" mrcheck_fmt_check_hash)
  mrcheck_keyed_check(mrcheck_fmt_once_links
    KEY "${fmt_VERSION}" "${mrcheck_fmt_includes}" "${mrcheck_fmt_once_hash}" "${mrcheck_fmt_check_hash}")
  if(NOT DEFINED CACHE{mrcheck_fmt_once_links})
    try_compile(mrcheck_fmt_once_links "${CMAKE_BINARY_DIR}/fmt_once_check"
      SOURCES "${PROJECT_SOURCE_DIR}/src/util/fmt_once.cpp" "${PROJECT_SOURCE_DIR}/cmake/fmt_once_check.cpp"
      CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${mrcheck_fmt_includes}"
      CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
      OUTPUT_VARIABLE mrcheck_fmt_once_log)
    if(NOT mrcheck_fmt_once_links)
      file(WRITE "${CMAKE_BINARY_DIR}/fmt_once_check.log" "${mrcheck_fmt_once_log}")
    endif()
  endif()
  unset(CMAKE_TRY_COMPILE_CONFIGURATION)
  if(mrcheck_fmt_once_links)
    set(mrcheck_fmt_once_ok ON)
  endif()
endif()

add_library(mrcheck_fmt INTERFACE)
if(mrcheck_fmt_once_ok)
  target_include_directories(mrcheck_fmt SYSTEM INTERFACE ${mrcheck_fmt_includes})
  message(STATUS "mrcheck: fmt ${fmt_VERSION}: compiled once (src/util/fmt_once.cpp)")
else()
  target_link_libraries(mrcheck_fmt INTERFACE fmt::fmt-header-only)
  if(MRCHECK_FMT_ONCE)
    message(STATUS "mrcheck: fmt ${fmt_VERSION}: header-only (src/util/fmt_once.cpp does not link with it: "
                   "${CMAKE_BINARY_DIR}/fmt_once_check.log)")
  else()
    message(STATUS "mrcheck: fmt ${fmt_VERSION}: header-only (MRCHECK_FMT_ONCE=OFF)")
  endif()
endif()
