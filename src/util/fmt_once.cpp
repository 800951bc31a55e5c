// fmt's compiled part, compiled once for the whole tree (cmake/FmtOnce.cmake, docs/DESIGN.md, "Why the plugin is two files").
//
// Every other file includes fmt without FMT_HEADER_ONLY, so each one compiles only the templates it uses and
// calls fmt's non-template functions (vformat, format_error, the float and locale helpers) here. This file is
// what a compiled libfmt holds: fmt's own definitions (format-inl.h, whose functions are external when
// FMT_HEADER_ONLY is not set) and explicit instantiations of the templates that format.h declares but does
// not define. It lives in the base layer, so the CLI, the prolog, the tests and both plugin objects carry
// their own private copy, hidden like the rest of the core: nothing loads libfmt.so, inside Slurm's daemons
// or anywhere else, exactly as with header-only fmt.
//
// The template list differs between fmt releases; cmake/FmtOnce.cmake links a sample program against this
// file at configure time and falls back to header-only fmt everywhere when it does not link.
#ifndef FMT_HEADER_ONLY  // header-only fallback: every file has all of this already
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
#if FMT_VERSION >= 100000 && FMT_VERSION < 110000
// fmt 10 declares this one extern (fmt 9 defines it in format.h, fmt 11 makes it a plain function).
template FMT_API void vformat_to(buffer<char>&, string_view, typename vformat_args<>::type, locale_ref);
#endif

}  // namespace detail
FMT_END_NAMESPACE
#endif
