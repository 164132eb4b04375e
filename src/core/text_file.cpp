#include "core/text_file.hpp"

#include <fstream>
#include <sstream>

#include "core/log.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kInit;
}  // namespace

Result readTextFile(const std::string& path, const char* what, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return TSR_FAIL(tsrInvalidArgument, "cannot open %s %s", what, path.c_str());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return TSR_FAIL(tsrInvalidArgument, "cannot read %s %s", what, path.c_str());
  *out = text.str();
  return tsrSuccess;
}

}  // namespace tessera
