// Reading an NCCL library (or net/tuner plugin) without loading it: the version NCCL prints at init is a literal
// in its .rodata ("NCCL version 2.28.9+cuda12.9", VERSION_STRING in NCCL's src/init.cc), and the plugin ABI a
// file offers is the set of ncclNetPlugin_vN / ncclTunerPlugin_vN symbols its .dynsym exports (NCCL's
// src/plugin/net.cc looks them up by those names). The file is the job user's: every offset is checked, reads
// are pread() into bounded buffers (a mapped file truncated under us would be SIGBUS), and it is opened
// O_NONBLOCK after fstat says it is a regular file.
#include <mrcheck/job_nccl.h>

#include <fmt/format.h>

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace mrcheck {

namespace {

constexpr std::uint64_t k_max_file = 4ULL << 30;      // NCCL 2.28 with every arch is ~300 MB
constexpr std::uint64_t k_max_table = 64ULL << 20;    // .dynsym / .dynstr
constexpr std::uint64_t k_max_rodata = 512ULL << 20;  // scanned in chunks
constexpr std::string_view k_version_tag = "NCCL version ";

// e_machine of this build's own target (docs/job-nccl.md); 0 where not listed, and then no file is refused for its
// machine.
#if defined(__x86_64__)
constexpr std::uint16_t k_host_machine = EM_X86_64;
#elif defined(__aarch64__)
constexpr std::uint16_t k_host_machine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr std::uint16_t k_host_machine = EM_PPC64;
#else
constexpr std::uint16_t k_host_machine = 0;
#endif

std::string machine_name(std::uint16_t m) {
  switch (m) {
    case EM_X86_64: return "x86_64";
    case EM_AARCH64: return "aarch64";
    case EM_PPC64: return "ppc64";
    case EM_RISCV: return "riscv64";
    default: return fmt::format("ELF machine {}", m);
  }
}

class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {}
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool read_at(int fd, std::uint64_t off, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
    off += static_cast<std::uint64_t>(r);
  }
  return true;
}

template <class T>
T le(const unsigned char* p) {
  T v{};
  std::memcpy(&v, p, sizeof v);  // ELF64 little-endian only (checked), and so is every host we build for
  return v;
}

struct section {
  std::uint32_t name = 0;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint64_t entsize = 0;
};

constexpr std::uint32_t k_sht_nobits = 8;
constexpr std::uint32_t k_sht_dynsym = 11;

bool is_abi_symbol(std::string_view s) {
  for (std::string_view p : {"ncclNetPlugin_v", "ncclCollNetPlugin_v", "ncclTunerPlugin_v", "ncclProfiler_v",
                             "ncclEnvPlugin_v", "ncclGinPlugin_v"}) {
    if (s.starts_with(p) && s.size() > p.size() &&
        std::all_of(s.begin() + static_cast<std::ptrdiff_t>(p.size()), s.end(),
                    [](char c) { return c >= '0' && c <= '9'; }))
      return true;
  }
  return false;
}

// "NCCL version " followed by the version text (digits, '.', '+', letters of a suffix like "cuda12.9").
std::string version_after_tag(const char* p, std::size_t n) {
  std::size_t i = 0;
  while (i < n && i < 48 &&
         (std::isalnum(static_cast<unsigned char>(p[i])) || p[i] == '.' || p[i] == '+' || p[i] == '-' || p[i] == '_'))
    ++i;
  std::string v(p, i);
  if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0]))) return {};
  return v;
}

std::string scan_rodata(int fd, const section& s, std::uint64_t file_size) {
  if (s.type == k_sht_nobits || s.offset > file_size || s.size > file_size - s.offset) return {};
  std::uint64_t end = s.offset + std::min(s.size, k_max_rodata);
  constexpr std::size_t k_chunk = 1 << 20;
  constexpr std::size_t k_overlap = 64;
  std::string buf;
  for (std::uint64_t off = s.offset; off < end;) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(k_chunk + k_overlap, end - off));
    buf.resize(n);
    if (!read_at(fd, off, buf.data(), n)) return {};
    for (std::size_t at = buf.find(k_version_tag); at != std::string::npos; at = buf.find(k_version_tag, at + 1)) {
      std::size_t v = at + k_version_tag.size();
      if (v + 16 > n && off + n < end) break;  // may be cut by the chunk end: the next chunk (overlap) has it
      std::string ver = version_after_tag(buf.data() + v, n - v);
      if (!ver.empty()) return ver;
    }
    if (off + n >= end) break;
    off += k_chunk;
  }
  return {};
}

// The ELF header's identity (its first 20 bytes): the magic, 64-bit little-endian, this node's machine. The loader
// refuses a library of another machine with "cannot open shared object file: No such file or directory", of a file
// that is there: say what it is (a venv or image made on another kind of node). "" when the file reads on.
std::string elf_identity_problem(const unsigned char* eh) {
  if (std::memcmp(eh,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return "not an ELF file";
  if (eh[4] != 2 || eh[5] != 1) return "not a 64-bit little-endian ELF file";
  if (auto m = le<std::uint16_t>(eh + 0x12); k_host_machine != 0 && m != k_host_machine)
    return fmt::format("built for {}, this node is {}: a library of another architecture", machine_name(m),
                       machine_name(k_host_machine));
  return {};
}

}  // namespace

int nccl_version_code(std::string_view dotted) {
  int part[3] = {0, 0, 0};
  const char* p = dotted.data();
  const char* e = dotted.data() + dotted.size();
  for (int i = 0; i < 3; ++i) {
    auto [q, ec] = std::from_chars(p, e, part[i]);
    if (ec != std::errc() || part[i] < 0 || part[i] > 99) return 0;
    p = q;
    if (i < 2) {
      if (p == e || *p != '.') return 0;
      ++p;
    }
  }
  return part[0] * 10000 + part[1] * 100 + part[2];
}

result<elf_library_info> scan_nccl_library(const std::string& path) {
  int raw = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (raw < 0) {
    int e = errno;
    if (e == ELOOP) return status::error(fmt::format("{}: a symbolic link loop", path));
    return status::error(fmt::format("{}: {}", path, std::strerror(e)));
  }
  fd_guard fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return status::error(fmt::format("{}: fstat: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return status::error(fmt::format("{}: not a regular file", path));
  elf_library_info info;
  info.size = static_cast<std::uint64_t>(st.st_size);
  if (info.size == 0) return status::error(fmt::format("{}: an empty (0-byte) file, not a library", path));
  if (info.size > k_max_file)
    return status::error(fmt::format("{}: {} bytes, too large for a library", path, info.size));
  unsigned char eh[64];
  if (info.size < sizeof eh || !read_at(fd.get(), 0, eh, sizeof eh))
    return status::error(fmt::format("{}: not an ELF file", path));
  if (std::string why = elf_identity_problem(eh); !why.empty()) return status::error(fmt::format("{}: {}", path, why));
  auto shoff = le<std::uint64_t>(eh + 0x28);
  auto shentsize = le<std::uint16_t>(eh + 0x3a);
  auto shnum = le<std::uint16_t>(eh + 0x3c);
  auto shstrndx = le<std::uint16_t>(eh + 0x3e);
  if (shentsize != 64 || shnum == 0 || shstrndx >= shnum || shoff > info.size ||
      static_cast<std::uint64_t>(shnum) * 64 > info.size - shoff)
    return status::error(fmt::format("{}: ELF section headers missing or out of the file", path));
  std::vector<unsigned char> sh(static_cast<std::size_t>(shnum) * 64);
  if (!read_at(fd.get(), shoff, sh.data(), sh.size()))
    return status::error(fmt::format("{}: cannot read the section headers", path));
  std::vector<section> secs(shnum);
  for (std::size_t i = 0; i < shnum; ++i) {
    const unsigned char* p = sh.data() + i * 64;
    secs[i] = {le<std::uint32_t>(p),        le<std::uint32_t>(p + 4),    le<std::uint64_t>(p + 0x18),
               le<std::uint64_t>(p + 0x20), le<std::uint32_t>(p + 0x28), le<std::uint64_t>(p + 0x38)};
  }
  auto load = [&](const section& s, std::string& out) {
    if (s.type == k_sht_nobits || s.offset > info.size || s.size > info.size - s.offset || s.size > k_max_table)
      return false;
    out.resize(static_cast<std::size_t>(s.size));
    return read_at(fd.get(), s.offset, out.data(), out.size());
  };
  std::string shstr;
  if (!load(secs[shstrndx], shstr)) return status::error(fmt::format("{}: bad section name table", path));
  auto name_of = [&](const section& s) -> std::string_view {
    if (s.name >= shstr.size()) return {};
    return std::string_view(shstr.c_str() + s.name);
  };
  for (const auto& s : secs) {
    if (name_of(s) == ".rodata") {
      info.version = scan_rodata(fd.get(), s, info.size);
      info.version_code = nccl_version_code(info.version.substr(0, info.version.find_first_of("+-_")));
    }
    if (s.type == k_sht_dynsym && s.link < secs.size() && s.entsize == 24) {
      std::string syms, strs;
      if (!load(s, syms) || !load(secs[s.link], strs))
        return status::error(fmt::format("{}: bad dynamic symbol table", path));
      for (std::size_t off = 0; off + 24 <= syms.size(); off += 24) {
        const auto* p = reinterpret_cast<const unsigned char*>(syms.data() + off);
        auto name = le<std::uint32_t>(p);
        auto shndx = le<std::uint16_t>(p + 6);
        if (shndx == 0 || name >= strs.size()) continue;  // undefined: an import, not an export
        std::string_view n(strs.c_str() + name);
        if (n == "ncclGetVersion") info.has_get_version = true;
        if (is_abi_symbol(n) && info.abi.size() < 32) info.abi.emplace_back(n);
      }
    }
  }
  std::sort(info.abi.begin(), info.abi.end());
  info.abi.erase(std::unique(info.abi.begin(), info.abi.end()), info.abi.end());
  return info;
}

std::string ld_cache_lookup(std::string_view cache, std::string_view soname) {
  constexpr std::string_view k_old = "ld.so-1.7.0";
  constexpr std::string_view k_new = "glibc-ld.so.cache1.1";
  std::size_t base = 0;
  if (cache.starts_with(k_old)) {
    if (cache.size() < 16) return {};
    auto n = le<std::uint32_t>(reinterpret_cast<const unsigned char*>(cache.data()) + 12);
    std::uint64_t after = 16 + static_cast<std::uint64_t>(n) * 12;
    base = static_cast<std::size_t>((after + 7) & ~std::uint64_t{7});  // the new table follows, 8-aligned
    if (base >= cache.size()) return {};
  }
  std::string_view c = cache.substr(base);
  if (!c.starts_with(k_new) || c.size() < 48) return {};
  const auto* p = reinterpret_cast<const unsigned char*>(c.data());
  auto nlibs = le<std::uint32_t>(p + 20);
  if (static_cast<std::uint64_t>(nlibs) * 24 > c.size() - 48) return {};
  // String offsets are relative to the new header (glibc elf/dl-cache.c: cache_data = cache_new).
  auto str_at = [&](std::uint32_t off) -> std::string_view {
    if (off >= c.size()) return {};
    std::size_t end = c.find('\0', off);
    if (end == std::string_view::npos) return {};
    return c.substr(off, end - off);
  };
  std::string fallback;
  for (std::uint32_t i = 0; i < nlibs; ++i) {
    const unsigned char* e = p + 48 + static_cast<std::size_t>(i) * 24;
    auto flags = le<std::int32_t>(e);
    if (str_at(le<std::uint32_t>(e + 4)) != soname) continue;
    std::string value(str_at(le<std::uint32_t>(e + 8)));
    // FLAG_ELF_LIBC6 with FLAG_X8664_LIB64 (0x0303) or FLAG_AARCH64_LIB64 (0x0a03): this machine's 64-bit ABI.
#if defined(__x86_64__)
    if ((flags & 0xffff) == 0x0303) return value;
#elif defined(__aarch64__)
    if ((flags & 0xffff) == 0x0a03) return value;
#endif
    if (fallback.empty()) fallback = value;
  }
  return fallback;
}

}  // namespace mrcheck
