// SVG charts; see svg_plot.hpp.
#include "svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace axonn::tools {
namespace {

constexpr double kW = 420, kH = 320, kLeft = 62, kRight = 14, kTop = 34, kBottom = 48;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

// A "nice" tick step for a range (1, 2 or 5 times a power of ten, about 5 ticks).
double tick_step(double span) {
  if (span <= 0) return 1;
  const double raw = span / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::string panel_svg(const SvgPanel& p, double x0) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const auto& s : p.series)
    for (auto [x, y] : s.points) {
      xmin = std::min(xmin, x), xmax = std::max(xmax, x), ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (p.diagonal) xmin = ymin = std::min(xmin, ymin), xmax = ymax = std::max(xmax, ymax);
  ymin = std::min(0.0, ymin);
  if (p.diagonal) xmin = ymin;
  const double xpad = (xmax - xmin) * 0.05 + (xmax == xmin), ypad = (ymax - ymin) * 0.08 + (ymax == ymin);
  xmin -= xpad, xmax += xpad, ymax += ypad;
  if (ymin < 0) ymin -= ypad;
  if (p.diagonal) xmin = ymin = std::min(xmin, ymin), xmax = ymax = std::max(xmax, ymax);  // y = x stays inside
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto X = [&](double x) { return x0 + kLeft + (x - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double y) { return kTop + (1 - (y - ymin) / (ymax - ymin)) * ph; };

  std::string s;
  s += fmt::format(R"~(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="white" stroke="#444"/>)~" "\n",
                   x0 + kLeft, kTop, pw, ph);
  s += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-size="13">{}</text>)~" "\n",
                   x0 + kLeft + pw / 2, kTop - 10, escape(p.title));
  const double xs = tick_step(xmax - xmin), ys = tick_step(ymax - ymin);
  auto tidy = [](double t, double step) { return std::abs(t) < 1e-9 * step ? 0.0 : t; };  // no "-0"
  for (double t = std::ceil(xmin / xs) * xs; t <= xmax; t += xs)
    s += fmt::format(R"~(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#444"/><text x="{0:.1f}" y="{3:.1f}" text-anchor="middle" font-size="10">{4:g}</text>)~" "\n",
                     X(t), kTop + ph, kTop + ph + 4, kTop + ph + 15, tidy(t, xs));
  for (double t = std::ceil(ymin / ys) * ys; t <= ymax; t += ys)
    s += fmt::format(R"~(<line x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" stroke="#ddd"/><text x="{3:.1f}" y="{4:.1f}" text-anchor="end" font-size="10">{5:g}</text>)~" "\n",
                     x0 + kLeft, Y(t), x0 + kLeft + pw, x0 + kLeft - 4, Y(t) + 3, tidy(t, ys));
  s += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-size="11">{}</text>)~" "\n",
                   x0 + kLeft + pw / 2, kH - 10, escape(p.x_label));
  s += fmt::format(R"~(<text transform="translate({:.1f},{:.1f}) rotate(-90)" text-anchor="middle" font-size="11">{}</text>)~" "\n",
                   x0 + 14, kTop + ph / 2, escape(p.y_label));
  if (p.diagonal)
    s += fmt::format(R"~(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#999" stroke-dasharray="4 3"/>)~" "\n",
                     X(xmin), Y(xmin), X(xmax), Y(xmax));
  double ly = kTop + 12;
  for (const auto& series : p.series) {
    auto marker = [&](double cx, double cy) {
      if (series.marker == "square")
        return fmt::format(R"~(<rect x="{:.1f}" y="{:.1f}" width="7" height="7" fill="{}"/>)~", cx - 3.5, cy - 3.5,
                           series.color);
      return fmt::format(R"~(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="none" stroke="{}" stroke-width="1.5"/>)~",
                         cx, cy, series.color);
    };
    for (auto [x, y] : series.points) s += marker(X(x), Y(y)) + "\n";
    s += marker(x0 + kLeft + 10, ly) +
         fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" font-size="10">{}</text>)~" "\n", x0 + kLeft + 18, ly + 3,
                     escape(series.name));
    ly += 14;
  }
  return s;
}

}  // namespace

std::string render_svg(const std::string& title, const std::vector<SvgPanel>& panels) {
  const double width = kW * static_cast<double>(std::max<size_t>(1, panels.size()));
  std::string s = fmt::format(
      R"~(<svg xmlns="http://www.w3.org/2000/svg" width="{0:.0f}" height="{1:.0f}" viewBox="0 0 {0:.0f} {1:.0f}" font-family="sans-serif">)~"
      "\n",
      width, kH + 20);
  s += fmt::format(R"~(<text x="{:.1f}" y="16" text-anchor="middle" font-size="14" font-weight="bold">{}</text>)~" "\n",
                   width / 2, escape(title));
  s += R"~(<g transform="translate(0,20)">)~" "\n";
  for (size_t i = 0; i < panels.size(); ++i) s += panel_svg(panels[i], kW * static_cast<double>(i));
  s += "</g>\n</svg>\n";
  return s;
}

}  // namespace axonn::tools
