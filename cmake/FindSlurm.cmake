# Finds the Slurm headers (slurm/spank.h) and libslurm, and reads SLURM_VERSION_NUMBER from slurm/slurm_version.h.
# Defines Slurm_FOUND, Slurm_VERSION, Slurm::headers (for the SPANK plugin: headers only, never -lslurm)
# and Slurm::slurm (for mrcheck-prolog, which calls slurmctld through libslurm).
# Also Slurm_PLUGIN_DIR: where this machine's Slurm keeps its plugins (Debian's slurm-wlm-basic-plugins:
# /usr/lib/<multiarch>/slurm-wlm; upstream's default PluginDir: <libdir>/slurm), found by a plugin every
# Slurm ships (auth_munge.so); empty when none is installed.
find_path(Slurm_INCLUDE_DIR slurm/spank.h)
find_library(Slurm_LIBRARY NAMES slurm)
if(Slurm_INCLUDE_DIR AND EXISTS "${Slurm_INCLUDE_DIR}/slurm/slurm_version.h")
  file(STRINGS "${Slurm_INCLUDE_DIR}/slurm/slurm_version.h" _v REGEX "^#define SLURM_VERSION_NUMBER")
  string(REGEX REPLACE ".*0x([0-9a-fA-F]+).*" "\\1" _hex "${_v}")
  math(EXPR _num "0x${_hex}")
  math(EXPR _maj "(${_num} >> 16) & 255")
  math(EXPR _min "(${_num} >> 8) & 255")
  math(EXPR _mic "${_num} & 255")
  # Slurm writes its minor with two digits (22.05.8), and so do we.
  if(_min LESS 10)
    set(_min "0${_min}")
  endif()
  set(Slurm_VERSION "${_maj}.${_min}.${_mic}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Slurm REQUIRED_VARS Slurm_INCLUDE_DIR Slurm_LIBRARY VERSION_VAR Slurm_VERSION)
if(Slurm_FOUND)
  if(NOT TARGET Slurm::headers)
    add_library(Slurm::headers INTERFACE IMPORTED)
    set_target_properties(Slurm::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${Slurm_INCLUDE_DIR}")
  endif()
  if(NOT TARGET Slurm::slurm)
    add_library(Slurm::slurm UNKNOWN IMPORTED)
    set_target_properties(Slurm::slurm PROPERTIES IMPORTED_LOCATION "${Slurm_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${Slurm_INCLUDE_DIR}")
  endif()
endif()
if(Slurm_LIBRARY)
  get_filename_component(_slurm_libdir "${Slurm_LIBRARY}" DIRECTORY)
  find_path(Slurm_PLUGIN_DIR auth_munge.so
    PATHS "${_slurm_libdir}/slurm-wlm" "${_slurm_libdir}/slurm" "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm"
          /usr/lib64/slurm /usr/lib/slurm /usr/local/lib/slurm
    NO_DEFAULT_PATH)
  if(NOT Slurm_PLUGIN_DIR)
    set(Slurm_PLUGIN_DIR "")
  endif()
endif()
mark_as_advanced(Slurm_INCLUDE_DIR Slurm_LIBRARY Slurm_PLUGIN_DIR)
