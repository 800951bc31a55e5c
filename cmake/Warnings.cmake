# Warnings and hardening shared by every target (enroot's list plus the C++ extras, and for C the prototype
# checks that -Wmissing-declarations makes in C++).
set(mrcheck_warnings
  -Wall -Wextra -Wshadow -Wformat=2 -Wconversion -Wno-sign-conversion -Wundef -Wcast-align
  -Wnull-dereference -Wdouble-promotion -Wmissing-declarations -Wvla -Wunused)
set(mrcheck_cxx_warnings -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual -Wimplicit-fallthrough)
set(mrcheck_c_warnings -Wstrict-prototypes -Wmissing-prototypes)
if(MRCHECK_WERROR)
  list(APPEND mrcheck_warnings -Werror)
endif()

# The warnings alone (-Werror with MRCHECK_WERROR), C and C++ alike: every target links them, through
# mrcheck_options or, where the hardening below must not apply, directly (the container helper, built without
# stack protector or fortified calls so that it starts under an image's older glibc: src/CMakeLists.txt; the
# test plugins and libraries that Slurm, NCCL or a job load: tests/).
set(mrcheck_warning_options
  ${mrcheck_warnings}
  $<$<COMPILE_LANGUAGE:CXX>:${mrcheck_cxx_warnings}>
  $<$<COMPILE_LANGUAGE:C>:${mrcheck_c_warnings}>)
add_library(mrcheck_warning_flags INTERFACE)
target_compile_options(mrcheck_warning_flags INTERFACE ${mrcheck_warning_options})

add_library(mrcheck_options INTERFACE)
target_compile_options(mrcheck_options INTERFACE ${mrcheck_warning_options} -fstack-protector-strong)
# _FORTIFY_SOURCE=2 unless the compiler or the distribution's flags already choose a level (Ubuntu's gcc
# defines _FORTIFY_SOURCE=3 itself when optimising; EL's %optflags pass -Wp,-D_FORTIFY_SOURCE=2; CI builds once
# with CXXFLAGS=-D_FORTIFY_SOURCE=3): a second, different definition would be a redefinition warning (-Werror).
# Asked per language (CMAKE_C_FLAGS and CMAKE_CXX_FLAGS may differ), and again whenever the flags change
# (cmake/KeyedCheck.cmake): the same build directory is configured by scripts/main.sh without a level and by
# scripts/test.sh with -D_FORTIFY_SOURCE=3.
include(CheckCSourceCompiles)
include(CheckCXXSourceCompiles)
include(KeyedCheck)
set(mrcheck_fortify_probe "#ifdef _FORTIFY_SOURCE\n#error set\n#endif\nint main(void) { return 0; }")
set(CMAKE_REQUIRED_FLAGS -O2)
mrcheck_keyed_check(MRCHECK_FORTIFY_UNSET_C)
check_c_source_compiles("${mrcheck_fortify_probe}" MRCHECK_FORTIFY_UNSET_C)
mrcheck_keyed_check(MRCHECK_FORTIFY_UNSET_CXX)
check_cxx_source_compiles("${mrcheck_fortify_probe}" MRCHECK_FORTIFY_UNSET_CXX)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_TRY_COMPILE_CONFIGURATION)
if(NOT MRCHECK_SANITIZE)
  foreach(lang C CXX)
    if(MRCHECK_FORTIFY_UNSET_${lang})
      target_compile_definitions(mrcheck_options INTERFACE
        $<$<AND:$<COMPILE_LANGUAGE:${lang}>,$<NOT:$<CONFIG:Debug>>>:_FORTIFY_SOURCE=2>)
    endif()
  endforeach()
endif()
target_link_options(mrcheck_options INTERFACE -Wl,-z,relro,-z,now,-z,noexecstack)
