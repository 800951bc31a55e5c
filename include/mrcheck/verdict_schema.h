// The versioned contract of mrcheck's JSON (docs/schema/README.md): every --json output carries
// "schema_version", and every check in it a severity and a recommended action from closed lists, so a consumer
// (a fleet pipeline, a health-event mapper) can rely on them without knowing mrcheck's check ids.
#pragma once

#include <mrcheck/check.h>

#include <string_view>

namespace mrcheck {

// Bumped when a key is removed, renamed or changes meaning; keys are only ever added within a version.
inline constexpr int k_json_schema_version = 1;

// ok (pass), info (skip: not applicable), warning (warn), critical (fail), unknown (error: the checker broke and
// says nothing about the node). The same five levels as NVIDIA's health-validation verdicts, in lower case.
std::string_view severity_name(verdict v);

// What an admin or an automation should do about one check's verdict, from the closed list
// none | fix_config | restart_slurmd | drain | reboot | update_firmware | contact_vendor
// (docs/schema/README.md has the table). pass, skip and error are always `none`.
std::string_view recommended_action(std::string_view check_id, verdict v);

}  // namespace mrcheck
