# mrcheck_keyed_check(VAR [AGAIN_IF_FALSE] [KEY TEXT...]): call just before a cached configure check (check_cxx_source_compiles,
# check_include_file, ... VAR) whose answer depends on the flags it is compiled with. CMake caches such an answer
# under VAR and never asks again, whatever the flags are at the next configure: a build directory configured
# once without a _FORTIFY_SOURCE level and again with -D_FORTIFY_SOURCE=3 (scripts/main.sh, then
# scripts/test.sh, in one clone) kept "unset" and added a second, different definition, a redefinition error
# under -Werror. Here the answer is forgotten, so the check runs again, whenever what the check compiles with
# has changed since it was cached: the compilers, their flags and the build type's, the CMAKE_REQUIRED_*
# variables. The check itself is made with the build type's flags (CMAKE_TRY_COMPILE_CONFIGURATION: by
# default a check sees no CMAKE_<LANG>_FLAGS_<CONFIG>, whatever the build type). AGAIN_IF_FALSE also asks
# again after a negative answer (a header a package installed since, scripts/install-deps.sh); KEY adds what
# else the answer depends on (a source file's hash, a library's version).
# tests/build/newcomer_sequence_test.sh configures as the two scripts do, in one directory, and compiles.
function(mrcheck_keyed_check var)
  cmake_parse_arguments(PARSE_ARGV 1 arg "AGAIN_IF_FALSE" "" "KEY")
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  set(key "${CMAKE_BUILD_TYPE}|${arg_KEY}")
  foreach(lang C CXX)
    string(APPEND key "|${CMAKE_${lang}_COMPILER}|${CMAKE_${lang}_FLAGS}|${CMAKE_${lang}_FLAGS_${config}}")
  endforeach()
  foreach(v CMAKE_REQUIRED_FLAGS CMAKE_REQUIRED_DEFINITIONS CMAKE_REQUIRED_INCLUDES CMAKE_REQUIRED_LINK_OPTIONS
            CMAKE_REQUIRED_LIBRARIES)
    string(APPEND key "|${${v}}")
  endforeach()
  string(SHA256 key "${key}")
  if(NOT "$CACHE{${var}_KEY}" STREQUAL "${key}" OR (arg_AGAIN_IF_FALSE AND NOT "$CACHE{${var}}"))
    unset(${var} CACHE)
    set(${var}_KEY "${key}" CACHE INTERNAL "what the cached ${var} was checked with (cmake/KeyedCheck.cmake)")
  endif()
  if(CMAKE_BUILD_TYPE)
    set(CMAKE_TRY_COMPILE_CONFIGURATION "${CMAKE_BUILD_TYPE}" PARENT_SCOPE)
  endif()
endfunction()
