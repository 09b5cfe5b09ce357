// Minimal SVG charts for `axplan validate` (no plotting library is packaged here):
// panels of points on linear axes, with ticks, labels, a legend and optional y = x.
//
// Example:
//   SvgPanel p;  p.title = "placement-aware";  p.x_label = "predicted rank";
//   p.series.push_back({"measured", "#1f77b4", "circle", {{1, 0.8}, {2, 0.9}}});
//   std::string svg = render_svg("Fig. 7", {p});
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace axonn::tools {

struct SvgSeries {
  std::string name;
  std::string color;   // CSS color
  std::string marker;  // "circle" or "square"
  std::vector<std::pair<double, double>> points;
};

struct SvgPanel {
  std::string title, x_label, y_label;
  std::vector<SvgSeries> series;
  bool diagonal = false;  // draw y = x over the common range
};

// Panels side by side, each 420 x 320 px, one shared title.
std::string render_svg(const std::string& title, const std::vector<SvgPanel>& panels);

}  // namespace axonn::tools
