#include "topology/pci_bus_id.hpp"

#include <cctype>
#include <cstring>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTopo;

// Reads up to `maxDigits` hex digits; false when there are none or too many.
bool readHex(const char*& p, int maxDigits, uint32_t* value) {
  uint32_t v = 0;
  int n = 0;
  while (std::isxdigit(static_cast<unsigned char>(*p))) {
    if (++n > maxDigits) return false;
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    ++p;
  }
  *value = v;
  return n > 0;
}

void skipBlanks(const char*& p) {
  while (*p == ' ' || *p == '\t' || *p == '\n') ++p;
}

}  // namespace

bool tryParsePciBusId(const char* text, PciBusId* out) {
  if (text == nullptr) return false;
  const char* p = text;
  skipBlanks(p);
  // Two colons: the domain is present; one: it is 0.
  const char* dot = std::strchr(p, '.');
  int colons = 0;
  for (const char* q = p; *q != '\0' && (dot == nullptr || q < dot); ++q) colons += (*q == ':');
  PciBusId id;
  if (colons == 2) {
    if (!readHex(p, 8, &id.domain) || *p++ != ':') return false;
  } else if (colons != 1) {
    return false;
  }
  if (!readHex(p, 2, &id.bus) || *p++ != ':') return false;
  if (!readHex(p, 2, &id.device) || id.device > 0x1f || *p++ != '.') return false;
  if (!readHex(p, 1, &id.function) || id.function > 7) return false;
  skipBlanks(p);
  if (*p != '\0') return false;
  *out = id;
  return true;
}

Result parsePciBusId(const char* text, PciBusId* out) {
  if (tryParsePciBusId(text, out)) return tsrSuccess;
  return TSR_FAIL(tsrInvalidArgument,
                  "'%s' is not a PCI bus id; expected [domain:]bus:device.function in "
                  "hexadecimal, e.g. 0000:3b:00.0",
                  text == nullptr ? "(null)" : text);
}

std::string formatPciBusId(const PciBusId& id) {
  return strprintf("%04x:%02x:%02x.%x", id.domain, id.bus, id.device, id.function);
}

}  // namespace tessera
