// Who fixes a finding (fix_owner, include/mrcheck/check.h): each check's owner when its verdict does not name
// one, and the owner a verdict carries into JSON, the drain reason and the record. docs/DESIGN.md "Owners".
#pragma once

#include <mrcheck/check.h>

#include <string_view>

namespace mrcheck {

// The owner of a check's findings when the verdict does not name one: `node` for the node's stack (drivers,
// firmware, modules, sysctls, slurmd's limit, the registration probes), `site` for slurm.conf's propagation,
// `job` for the job's own limits and image. `none` for an id no check has.
fix_owner default_owner(std::string_view check_id);
// c.owner when the check named it (stack, nofile, memlock in the plugin: from the hop), else default_owner().
fix_owner owner_of(const check_result& c);

}  // namespace mrcheck
