// `uscm sim`'s PNG plots through gnuplot: setup_cdf.png and
// retransmissions.png (and timeseries.png with samples), one curve per run;
// the data beside them in DIR/*.dat and the script in DIR/plots.gp.
#ifndef USCM_TOOLS_SIM_PLOTS_H_
#define USCM_TOOLS_SIM_PLOTS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/workload.h"

namespace uscm::tools {

bool HaveGnuplot();

// One entry per run in each vector (`series` empty without samples);
// `grouping` ends each plot's title ("CDF per loss rate").
absl::Status WritePlots(const std::string& dir, const std::string& grouping,
                        const std::vector<std::string>& labels,
                        const std::vector<std::vector<double>>& setups,
                        const std::vector<std::map<int, int>>& retx,
                        const std::vector<std::vector<Sample>>& series);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_SIM_PLOTS_H_
