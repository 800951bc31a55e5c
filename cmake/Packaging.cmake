# Man pages and the Debian package.
#
# Man pages are generated at build time by man/mangen.cpp from templates in man/ plus the only sources of
# truth for what they list: the built programs' --help output and mrcheck::config_keys(). A command that
# the usage names but the dispatcher does not know, or a --help that fails, fails the build.
#
# The package: `cpack -G DEB` in a build configured for Debian's layout (packaging/build-deb.sh does it):
#   cmake -DCMAKE_INSTALL_PREFIX=/usr -DMRCHECK_SLURM_PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm ...
# The prefix is compiled in (the plugin execs <bindir>/mrcheck as its probe helper), so the package
# installs under CMAKE_INSTALL_PREFIX, never somewhere the binaries do not expect.
include_guard(GLOBAL)

option(MRCHECK_BUILD_MAN "Generate the man pages from --help and config_keys() (needs gzip)" ON)

if(MRCHECK_BUILD_MAN)
  find_program(MRCHECK_GZIP gzip REQUIRED)
  add_executable(mrcheck_mangen "${PROJECT_SOURCE_DIR}/man/mangen.cpp")
  target_link_libraries(mrcheck_mangen PRIVATE mrcheck_core mrcheck_options)

  # string(TIMESTAMP) honours SOURCE_DATE_EPOCH, so a reproducible build gets a fixed date.
  string(TIMESTAMP mrcheck_man_date "%Y-%m-%d" UTC)
  if(Slurm_VERSION MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)")
    # Slurm's own spelling (SLURM_VERSION_STRING, the "Incompatible Slurm plugin" message): two-digit minor.
    math(EXPR mrcheck_m "${CMAKE_MATCH_2}")
    if(mrcheck_m LESS 10)
      set(mrcheck_m "0${mrcheck_m}")
    endif()
    set(mrcheck_man_slurm "${CMAKE_MATCH_1}.${mrcheck_m}.${CMAKE_MATCH_3}")
  else()
    set(mrcheck_man_slurm "(none: built without Slurm headers)")
  endif()
  set(mrcheck_man_vars
    --set "VERSION=${PROJECT_VERSION}"
    --set "DATE=${mrcheck_man_date}"
    --set "SLURM_VERSION=${mrcheck_man_slurm}"
    --set "DEFAULT_CONFIG=${MRCHECK_DEFAULT_CONFIG}"
    --set "PLUGIN_DIR=${MRCHECK_SLURM_PLUGIN_DIR}"
    --set "DATADIR=${CMAKE_INSTALL_FULL_DATADIR}"
    --set "SBINDIR=${CMAKE_INSTALL_FULL_SBINDIR}")

  set(mrcheck_man_dir "${PROJECT_BINARY_DIR}/man")
  file(MAKE_DIRECTORY "${mrcheck_man_dir}")
  set(mrcheck_man_outputs)

  # mrcheck_man(PAGE SECTION [EXES target...]): man/PAGE.SECTION.in -> build/man/PAGE.SECTION(.gz)
  function(mrcheck_man page section)
    cmake_parse_arguments(arg "" "" "EXES" ${ARGN})
    set(exe_args)
    foreach(t IN LISTS arg_EXES)
      list(APPEND exe_args --exe "${t}=$<TARGET_FILE:${t}>")
    endforeach()
    set(tmpl "${PROJECT_SOURCE_DIR}/man/${page}.${section}.in")
    set(out "${mrcheck_man_dir}/${page}.${section}")
    add_custom_command(OUTPUT "${out}" "${out}.gz"
      COMMAND mrcheck_mangen --template "${tmpl}" --out "${out}" ${exe_args} ${mrcheck_man_vars}
      # -n: no name or timestamp in the gzip header (Debian policy 12.1, reproducible builds)
      COMMAND "${MRCHECK_GZIP}" -9nf -k "${out}"
      DEPENDS mrcheck_mangen "${tmpl}" ${arg_EXES}
      COMMENT "mrcheck: man page ${page}(${section})"
      VERBATIM)
    install(FILES "${out}.gz" DESTINATION "${CMAKE_INSTALL_MANDIR}/man${section}")
    set(mrcheck_man_outputs ${mrcheck_man_outputs} "${out}" "${out}.gz" PARENT_SCOPE)
  endfunction()

  mrcheck_man(mrcheck 1 EXES mrcheck)
  if(TARGET spank_mrcheck)
    # The page documents the plugin's option and keys; it depends on the plugin so that a build without
    # Slurm headers does not ship a page for a plugin it lacks.
    mrcheck_man(spank_mrcheck 8 EXES spank_mrcheck)
  endif()
  if(TARGET mrcheck-prolog)
    mrcheck_man(mrcheck-prolog 8 EXES mrcheck-prolog)
  else()
    message(STATUS "mrcheck: no mrcheck-prolog target yet: mrcheck-prolog(8) not generated")
  endif()
  add_custom_target(mrcheck_man ALL DEPENDS ${mrcheck_man_outputs})
endif()

# ---- Debian package -------------------------------------------------------------------------------------
set(MRCHECK_DEB_MAINTAINER "mrcheck maintainers <root@localhost>" CACHE STRING
  "Maintainer field of the .deb (set it to your site's contact)")

set(CPACK_PACKAGE_NAME "mrcheck")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "mrcheck")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Slurm SPANK plugin, prolog and CLI against NCCL ibv_reg_mr failures")
# Extended description: CPack indents each line by one space; "." alone is a paragraph break. No double
# quotes: CPackConfig.cmake would split the text at them.
set(CPACK_PACKAGE_DESCRIPTION [=[mrcheck keeps GPU training jobs on Slurm from dying with 'NCCL WARN Call to
ibv_reg_mr_iova2 failed with error Cannot allocate memory' and, when they do, says
why in one line and names the fix.
.
It ships spank_mrcheck.so (srun --mr-check: the locked-memory limit along the
whole job chain; memory registration and NCCL probes as the job user),
mrcheck-prolog (the RDMA/GPU driver and firmware matrix; drains misaligned nodes
through slurmctld) and mrcheck (report, chain, probe, explain, dump).
.
Install it on login and compute nodes. libibverbs, CUDA, NCCL and NVML are
loaded at run time where present.]=])
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_GENERATOR "DEB")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")  # mrcheck_<version>-<release>_<arch>.deb
# The Debian revision names the Slurm release the package is for (0.2.0-1+slurm24.11): one package per
# release, and a site can tell them apart by name (docs/slurm-releases.md).
set(mrcheck_deb_revision "1")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${MRCHECK_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION "admin")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Depends from what is linked (libc, libstdc++, fmt, hwloc, libmunge for the channel between nodes, libslurm for
# the prolog), by dpkg-shlibdeps. munged itself is the site's, as Slurm's auth/munge needs it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The plugin loads only into the Slurm major.minor it was built against (src/common/plugin.c compares
# plugin_version & 0xffff00 for spank), so the package needs that release's Slurm: from Debian
# (slurm-wlm-basic-plugins, which ships libslurmfull.so that srun and slurmstepd resolve the plugin's spank_*
# calls from) or from SchedMD's own Debian packaging (slurm-smd, 23.11 and later). dpkg has no "A in a range
# or B in a range": each bound is a clause with both names, which a node with one of the two satisfies
# exactly when its release is in range.
set(mrcheck_deb_depends "")
if(TARGET spank_mrcheck AND Slurm_VERSION MATCHES "^([0-9]+)\\.([0-9]+)\\.")
  # Slurm spells its minor with two digits (22.05); dpkg compares digits numerically, so this is cosmetic.
  set(mrcheck_slurm_major "${CMAKE_MATCH_1}")
  math(EXPR mrcheck_slurm_minor "${CMAKE_MATCH_2}")
  math(EXPR mrcheck_slurm_next "${mrcheck_slurm_minor} + 1")
  foreach(v mrcheck_slurm_minor mrcheck_slurm_next)
    if(${v} LESS 10)
      set(${v} "0${${v}}")
    endif()
  endforeach()
  set(mrcheck_mm "${mrcheck_slurm_major}.${mrcheck_slurm_minor}")
  set(mrcheck_next "${mrcheck_slurm_major}.${mrcheck_slurm_next}")
  set(mrcheck_deb_depends
    "slurm-wlm-basic-plugins (>= ${mrcheck_mm}) | slurm-smd (>= ${mrcheck_mm}), slurm-wlm-basic-plugins (<< ${mrcheck_next}) | slurm-smd (<< ${mrcheck_next})")
  set(mrcheck_deb_revision "1+slurm${mrcheck_mm}")
endif()
set(CPACK_DEBIAN_PACKAGE_RELEASE "${mrcheck_deb_revision}")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${mrcheck_deb_depends}")
# dlopen'd at run time only where present: one package for GPU nodes, CPU login nodes, nodes without rdma-core.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libibverbs1, ibverbs-providers")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libcuda1, libnvidia-ml1, libnccl2, man-db")

if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr" OR
   NOT MRCHECK_SLURM_PLUGIN_DIR STREQUAL "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm")
  message(STATUS "mrcheck: a .deb from this build installs under ${CMAKE_INSTALL_PREFIX} and puts the plugin in "
                 "${MRCHECK_SLURM_PLUGIN_DIR}; Debian's Slurm needs packaging/build-deb.sh's settings")
endif()

include(CPack)
