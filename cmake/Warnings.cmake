# Warnings and hardening shared by every target (enroot's list plus the C++ extras).
set(mrcheck_warnings
  -Wall -Wextra -Wshadow -Wformat=2 -Wconversion -Wno-sign-conversion -Wundef -Wcast-align
  -Wnull-dereference -Wdouble-promotion -Wmissing-declarations -Wvla -Wunused)
set(mrcheck_cxx_warnings -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual -Wimplicit-fallthrough)
if(MRCHECK_WERROR)
  list(APPEND mrcheck_warnings -Werror)
endif()

add_library(mrcheck_options INTERFACE)
target_compile_options(mrcheck_options INTERFACE
  ${mrcheck_warnings}
  $<$<COMPILE_LANGUAGE:CXX>:${mrcheck_cxx_warnings}>
  -fstack-protector-strong)
# _FORTIFY_SOURCE=2 unless the compiler or the distribution's flags already choose a level (Ubuntu's gcc
# defines _FORTIFY_SOURCE=3 itself when optimising; EL's %optflags pass -Wp,-D_FORTIFY_SOURCE=2; CI builds once
# with CXXFLAGS=-D_FORTIFY_SOURCE=3): a second, different definition would be a redefinition warning (-Werror).
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS -O2)
check_cxx_source_compiles("#ifdef _FORTIFY_SOURCE\n#error set\n#endif\nint main() { return 0; }" MRCHECK_FORTIFY_UNSET)
unset(CMAKE_REQUIRED_FLAGS)
if(NOT MRCHECK_SANITIZE AND MRCHECK_FORTIFY_UNSET)
  target_compile_definitions(mrcheck_options INTERFACE $<$<NOT:$<CONFIG:Debug>>:_FORTIFY_SOURCE=2>)
endif()
target_link_options(mrcheck_options INTERFACE -Wl,-z,relro,-z,now,-z,noexecstack)
