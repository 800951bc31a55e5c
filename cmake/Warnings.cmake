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
if(NOT MRCHECK_SANITIZE)
  target_compile_definitions(mrcheck_options INTERFACE $<$<NOT:$<CONFIG:Debug>>:_FORTIFY_SOURCE=2>)
endif()
target_link_options(mrcheck_options INTERFACE -Wl,-z,relro,-z,now,-z,noexecstack)
