// The admins' step record in AdminComment: decode_node_record() reads what another node's root
// collector sent over TCP (its tokens come from the job: probe messages, host names), format_step_record()
// builds the step's line, append_admin_comment() adds it to the job's current AdminComment.
// Input: byte 0 = node count (low 4 bits) and the max of AdminComment (high 4 bits), then NUL-separated:
// a node record line, a second one, the existing AdminComment, the step label, node names (one a line).
// Invariants: a record that decodes has valid ids, at most 32 checks, tokens printable without '|' or ';' and
// at most 96 bytes; it re-encodes to one printable line within 8 KiB that decodes again (to the same record:
// MRCHECK_FUZZ_STRICT=1, finding F8); errors are printable. The step record is one printable line starting
// "mrcheck: " with no '|' (no forged record); the AdminComment is at most min(max, 65535) bytes, ends with the
// new record (or its cut), and keeps every segment that is not mrcheck's.
// fuzz-requires: admin_record.h
#include "fuzz_common.h"

#include <mrcheck/admin_record.h>
#include <mrcheck/units.h>

#include <algorithm>

namespace {

std::string_view next_part(std::string_view& rest) {
  std::size_t nul = rest.find('\0');
  std::string_view part = rest.substr(0, nul);
  rest = nul == std::string_view::npos ? std::string_view{} : rest.substr(nul + 1);
  return part;
}

bool valid_id(std::string_view id) {
  return !id.empty() && id.size() <= 32 && std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// Well-formed UTF-8 (RFC 3629: shortest form, no surrogates, at most U+10FFFF), what JSON's dump() keeps as is.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;  // continuation bytes
    if (c < 0x80) {
      n = 0;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    std::uint32_t cp = n == 0 ? c : c & (0x3fu >> n);
    for (std::size_t k = 1; k <= n; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff))) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

std::vector<std::string> segments(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    auto p = s.find(" | ");
    // A separator followed by another '|' belongs to the text before it ("note |" + " | " + record, F9).
    while (p != std::string_view::npos && p + 3 < s.size() && s[p + 3] == '|') p = s.find(" | ", p + 1);
    std::string_view seg = mrcheck::trim_space(s.substr(0, p));
    if (!seg.empty()) out.emplace_back(seg);
    if (p == std::string_view::npos) break;
    s = s.substr(p + 3);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  if (size < 1) return 0;
  const std::uint32_t nnodes = data[0] & 15;
  constexpr std::size_t k_maxes[] = {0, 24, 64, 256, 512, 1024, 4096, 65535, 70000};
  const std::size_t max = k_maxes[(data[0] >> 4) % std::size(k_maxes)];
  std::string_view rest = fuzz::as_text(data + 1, size - 1);

  std::vector<node_record> records;
  for (int i = 0; i < 2; ++i) {
    std::string_view line = next_part(rest);
    auto r = decode_node_record(line);
    if (!r) {
      MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
      continue;
    }
    MRCHECK_FUZZ_REQUIRE(line.size() <= k_node_record_max, "longer than the cap");
    MRCHECK_FUZZ_REQUIRE(r->checks.size() <= k_node_checks_max, "too many checks");
    MRCHECK_FUZZ_REQUIRE(r->node.size() <= 64, r->node);
    MRCHECK_FUZZ_REQUIRE(valid_utf8(r->node), r->node);  // cut where a character starts (F11)
    for (const auto& c : r->checks) {
      MRCHECK_FUZZ_REQUIRE(valid_id(c.id), c.id);
      MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(c.token) && c.token.size() <= k_token_max, c.token);
      MRCHECK_FUZZ_REQUIRE(c.token.find_first_of("|;") == std::string::npos, c.token);
    }
    std::string again = encode_node_record(*r);
    MRCHECK_FUZZ_REQUIRE(again.size() <= k_node_record_max && fuzz::printable_ascii(again), again);
    auto back = decode_node_record(again);
    MRCHECK_FUZZ_REQUIRE(back.is_ok(), again + " -> " + back.error().message());
    // A token escaped on its node passes node 0 unchanged (finding F8, fixed), and so does a node name cut at
    // 64 bytes (finding F11, fixed: the cut falls where a UTF-8 character starts): decode(encode(r)) == r.
    MRCHECK_FUZZ_REQUIRE(*back == *r, again);
    records.push_back(std::move(*r));
  }
  std::string_view existing = next_part(rest);
  std::string_view step = next_part(rest);
  std::vector<std::string> names;
  while (!rest.empty() && names.size() < 32) {
    std::size_t nl = rest.find('\n');
    names.emplace_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  }

  std::string rec = format_step_record(step, nnodes, records, names);
  MRCHECK_FUZZ_REQUIRE(rec.starts_with("mrcheck: ") && fuzz::printable_ascii(rec), rec);
  MRCHECK_FUZZ_REQUIRE(rec.find('|') == std::string::npos, rec);

  auto out = append_admin_comment(existing, rec, max);
  if (!out) return 0;
  MRCHECK_FUZZ_REQUIRE(out->size() <= std::min(max, k_admin_comment_slurm_max), *out);
  std::vector<std::string> after = segments(*out);
  MRCHECK_FUZZ_REQUIRE(!after.empty(), *out);
  const std::string& last = after.back();
  MRCHECK_FUZZ_REQUIRE(last == rec || (last.ends_with("...") && rec.starts_with(last.substr(0, last.size() - 3))),
                       last);
  // Text that is not mrcheck's is never folded or dropped, and keeps its order.
  // Byte for byte, in order, before the new record (a lone '|' of theirs may join their neighbour's segment).
  const std::size_t new_record_at = out->size() - last.size();
  std::size_t at = 0;
  for (const auto& seg : segments(existing)) {
    if (seg.starts_with("mrcheck: ")) continue;
    auto pos = out->find(seg, at);
    MRCHECK_FUZZ_REQUIRE(pos != std::string::npos && pos + seg.size() <= new_record_at, seg);
    at = pos + seg.size();
  }
  return 0;
}
