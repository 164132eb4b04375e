#include "topology/hwloc_discovery.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/build_config.hpp"

#if TESSERA_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTopo;
}  // namespace

#if !TESSERA_HAVE_HWLOC

namespace {

// No PCI tree: distinct GPUs are SYS, and no NIC is nearer than another.
void fillWithoutPciTree(TopologyData* d) {
  size_t n = d->gpus.size();
  d->gpuPci.assign(n * n, PathClass::kSys);
  for (size_t i = 0; i < n; ++i) d->gpuPci[i * n + i] = PathClass::kLoc;
  d->gpuNic.assign(n * d->nics.size(), PathClass::kSys);
  d->nearestNic.assign(n, d->nics.empty() ? -1 : 0);
  d->nvlink.gpuGpu.assign(n * n, 0);
  d->nvlink.toSwitch.assign(n, 0);
}

}  // namespace

Result discoverWithHwloc(const std::string& xmlPath, TopologyData* out) {
  if (!xmlPath.empty())
    return TSR_FAIL(tsrInvalidUsage,
                    "cannot load topology file '%s': this build of tessera has no hwloc",
                    xmlPath.c_str());
  TopologyData d;
  d.source = "this machine";
  d.hasPci = false;
  d.pciNote = "this build of tessera has no hwloc";
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  d.pus = n > 0 ? static_cast<int>(n) : 0;
  fillWithoutPciTree(&d);
  *out = std::move(d);
  return tsrSuccess;
}

#else  // TESSERA_HAVE_HWLOC

namespace {

// A FIFO or a device would make hwloc block or read forever: only regular files are read.
Result checkReadableFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return TSR_FAIL(tsrInvalidArgument, "topology file '%s' cannot be read: %s", path.c_str(),
                    std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return TSR_FAIL(tsrInvalidArgument, "topology file '%s' is not a regular file", path.c_str());
  if (access(path.c_str(), R_OK) != 0)
    return TSR_FAIL(tsrInvalidArgument, "topology file '%s' cannot be read: %s", path.c_str(),
                    std::strerror(errno));
  return tsrSuccess;
}

constexpr unsigned kNvidiaVendor = 0x10de;

bool isGpu(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_PCI_DEVICE && o->attr->pcidev.vendor_id == kNvidiaVendor &&
         (o->attr->pcidev.class_id >> 8) == 0x03;  // display: VGA 0x0300, 3D 0x0302
}

bool isNvswitch(hwloc_obj_t o) {
  if (o->type != HWLOC_OBJ_PCI_DEVICE) return false;
  if (o->subtype != nullptr && std::strcmp(o->subtype, "NVSwitch") == 0) return true;
  return o->attr->pcidev.vendor_id == kNvidiaVendor && o->attr->pcidev.class_id == 0x0680;
}

bool isNetworkOsdev(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_OS_DEVICE && (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
                                            o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS);
}

bool hasNetworkOsdev(hwloc_obj_t pci) {
  for (hwloc_obj_t c = pci->io_first_child; c != nullptr; c = c->next_sibling)
    if (isNetworkOsdev(c)) return true;
  return false;
}

bool isNic(hwloc_obj_t o) {
  if (o->type != HWLOC_OBJ_PCI_DEVICE) return false;
  unsigned cls = o->attr->pcidev.class_id;
  // Network controllers (Ethernet 0x0200, InfiniBand 0x0207, ...) and the old serial-bus
  // InfiniBand class; plus any device the OS exposes as a network or verbs device.
  return (cls >> 8) == 0x02 || cls == 0x0c06 || hasNetworkOsdev(o);
}

PciBusId busIdOf(hwloc_obj_t o) {
  PciBusId id;
  id.domain = o->attr->pcidev.domain;
  id.bus = o->attr->pcidev.bus;
  id.device = o->attr->pcidev.dev;
  id.function = o->attr->pcidev.func;
  return id;
}

int depthOf(hwloc_obj_t o) {
  int d = 0;
  for (; o->parent != nullptr; o = o->parent) ++d;
  return d;
}

// hwloc_get_common_ancestor_obj compares depths, which are negative sentinels for I/O
// objects, so the common ancestor is found by walking parents.
hwloc_obj_t commonAncestor(hwloc_obj_t a, hwloc_obj_t b) {
  int da = depthOf(a), db = depthOf(b);
  for (; da > db; --da) a = a->parent;
  for (; db > da; --db) b = b->parent;
  while (a != b) {
    a = a->parent;
    b = b->parent;
  }
  return a;
}

int bridgesBetween(hwloc_obj_t o, hwloc_obj_t ancestor) {
  int n = 0;
  for (o = o->parent; o != nullptr && o != ancestor; o = o->parent)
    n += o->type == HWLOC_OBJ_BRIDGE;
  return n;
}

// NCCL's classes from the PCI tree. A PCIe switch appears in hwloc as an upstream-port bridge
// whose children are downstream-port bridges, so two devices behind one switch have the
// upstream port as common ancestor with one bridge (their downstream port) on each side.
PathClass pciPathClass(hwloc_obj_t a, hwloc_obj_t b, int* ancestorDepth) {
  hwloc_obj_t lca = commonAncestor(a, b);
  if (ancestorDepth != nullptr) *ancestorDepth = depthOf(lca);
  if (a == b) return PathClass::kLoc;
  if (lca == a || lca == b) return PathClass::kPix;
  switch (lca->type) {
    case HWLOC_OBJ_BRIDGE:
      if (lca->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) return PathClass::kPhb;
      return std::max(bridgesBetween(a, lca), bridgesBetween(b, lca)) <= 1 ? PathClass::kPix
                                                                           : PathClass::kPxb;
    case HWLOC_OBJ_PCI_DEVICE:
    case HWLOC_OBJ_OS_DEVICE: return PathClass::kPix;
    default: {
      // Different host bridges: one NUMA node below the meeting point means one CPU socket.
      int nodes = lca->nodeset != nullptr ? hwloc_bitmap_weight(lca->nodeset) : -1;
      return (nodes == 0 || nodes == 1) ? PathClass::kPhb : PathClass::kSys;
    }
  }
}

void localityOf(hwloc_topology_t topo, hwloc_obj_t o, int* numaNode, std::vector<int>* cpus) {
  hwloc_obj_t host = hwloc_get_non_io_ancestor_obj(topo, o);
  *numaNode = -1;
  cpus->clear();
  if (host == nullptr) return;
  if (host->nodeset != nullptr && hwloc_bitmap_weight(host->nodeset) == 1)
    *numaNode = hwloc_bitmap_first(host->nodeset);
  if (host->cpuset != nullptr && hwloc_bitmap_weight(host->cpuset) > 0) {
    unsigned i;
    hwloc_bitmap_foreach_begin(i, host->cpuset) cpus->push_back(static_cast<int>(i));
    hwloc_bitmap_foreach_end();
  }
}

std::string gpuModel(hwloc_obj_t pci) {
  for (hwloc_obj_t c = pci->io_first_child; c != nullptr; c = c->next_sibling) {
    const char* m = hwloc_obj_get_info_by_name(c, "GPUModel");
    if (m != nullptr) return m;
  }
  return pci->name != nullptr ? pci->name : "";
}

std::vector<std::string> nicNames(hwloc_obj_t o) {
  std::vector<std::string> verbs, net;
  auto add = [&](hwloc_obj_t d) {
    if (!isNetworkOsdev(d) || d->name == nullptr) return;
    (d->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ? verbs : net).push_back(d->name);
  };
  if (o->type == HWLOC_OBJ_OS_DEVICE) add(o);
  for (hwloc_obj_t c = o->io_first_child; c != nullptr; c = c->next_sibling) add(c);
  verbs.insert(verbs.end(), net.begin(), net.end());
  return verbs;
}

bool hasPciAncestor(hwloc_obj_t o) {
  for (o = o->parent; o != nullptr; o = o->parent)
    if (o->type == HWLOC_OBJ_PCI_DEVICE) return true;
  return false;
}

// NVLinks from hwloc's "NVLinkBandwidth" matrix (GPUs appear as their OS devices, NVSwitches as
// PCI devices). Returns false when the matrix is absent.
bool nvlinksFromDistances(hwloc_topology_t topo, const std::vector<hwloc_obj_t>& gpus,
                          NvlinkEdges* e) {
#if HWLOC_API_VERSION >= 0x00020100
  unsigned nr = 1;
  hwloc_distances_s* dist = nullptr;
  if (hwloc_distances_get_by_name(topo, "NVLinkBandwidth", &nr, &dist, 0) != 0 || nr == 0)
    return false;
  size_t n = gpus.size();
  unsigned m = dist->nbobjs;
  std::vector<int> gpuOf(m, -1);
  std::vector<bool> isSwitch(m, false);
  for (unsigned k = 0; k < m; ++k) {
    hwloc_obj_t o = dist->objs[k];
    while (o != nullptr && o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
    if (o == nullptr) continue;
    auto it = std::find(gpus.begin(), gpus.end(), o);
    if (it != gpus.end())
      gpuOf[k] = static_cast<int>(it - gpus.begin());
    else
      isSwitch[k] = isNvswitch(o);
  }
  for (unsigned i = 0; i < m; ++i) {
    for (unsigned j = 0; j < m; ++j) {
      if (i == j || dist->values[static_cast<size_t>(i) * m + j] == 0) continue;
      int gi = gpuOf[i], gj = gpuOf[j];
      if (gi >= 0 && gj >= 0) {
        e->gpuGpu[static_cast<size_t>(gi) * n + static_cast<size_t>(gj)] = 1;
        e->gpuGpu[static_cast<size_t>(gj) * n + static_cast<size_t>(gi)] = 1;
      } else if (gi >= 0 && isSwitch[j]) {
        e->toSwitch[static_cast<size_t>(gi)] = 1;
      } else if (gj >= 0 && isSwitch[i]) {
        e->toSwitch[static_cast<size_t>(gj)] = 1;
      }
    }
  }
  hwloc_distances_release(topo, dist);
  return true;
#else
  (void)topo;
  (void)gpus;
  (void)e;
  return false;
#endif
}

void describe(hwloc_topology_t topo, TopologyData* d) {
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); o != nullptr;
       o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o))
    d->numaNodes.push_back({static_cast<int>(o->os_index), o->attr->numanode.local_memory});
  d->packages = std::max(0, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
  d->cores = std::max(0, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE));
  d->pus = std::max(0, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));

  std::vector<std::pair<PciBusId, hwloc_obj_t> > gpus;
  std::vector<hwloc_obj_t> nics;
  int pciDevices = 0;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, nullptr); o != nullptr;
       o = hwloc_get_next_pcidev(topo, o)) {
    ++pciDevices;
    if (isGpu(o))
      gpus.emplace_back(busIdOf(o), o);
    else if (isNvswitch(o))
      d->nvswitches.push_back(formatPciBusId(busIdOf(o)));
    else if (isNic(o))
      nics.push_back(o);
  }
  // Network devices hwloc knows only as OS devices (no PCI parent visible).
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o != nullptr;
       o = hwloc_get_next_osdev(topo, o))
    if (isNetworkOsdev(o) && !hasPciAncestor(o)) nics.push_back(o);

  std::sort(gpus.begin(), gpus.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  gpus.erase(std::unique(gpus.begin(), gpus.end(),
                         [](const auto& a, const auto& b) { return a.first == b.first; }),
             gpus.end());
  std::vector<hwloc_obj_t> gpuObjs;
  for (const auto& [id, o] : gpus) {
    GpuInfo g;
    g.busId = formatPciBusId(id);
    localityOf(topo, o, &g.numaNode, &g.cpus);
    g.model = gpuModel(o);
    d->gpus.push_back(std::move(g));
    d->gpuIds.push_back(id);
    gpuObjs.push_back(o);
  }
  for (hwloc_obj_t o : nics) {
    NicInfo nic;
    if (o->type == HWLOC_OBJ_PCI_DEVICE) nic.busId = formatPciBusId(busIdOf(o));
    nic.names = nicNames(o);
    localityOf(topo, o, &nic.numaNode, &nic.cpus);
    d->nics.push_back(std::move(nic));
  }

  d->hasPci = pciDevices > 0;
  if (!d->hasPci)
    d->pciNote = "hwloc found no PCI device (no access to /sys/bus/pci, or a file without I/O)";

  size_t n = gpuObjs.size(), m = nics.size();
  d->gpuPci.assign(n * n, PathClass::kSys);
  d->gpuNic.assign(n * m, PathClass::kSys);
  d->nearestNic.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j)
      d->gpuPci[i * n + j] = pciPathClass(gpuObjs[i], gpuObjs[j], nullptr);
    int bestDepth = -1;
    for (size_t k = 0; k < m; ++k) {
      int depth = 0;
      PathClass c = pciPathClass(gpuObjs[i], nics[k], &depth);
      d->gpuNic[i * m + k] = c;
      int best = d->nearestNic[i];
      if (best < 0 || c < d->gpuNic[i * m + static_cast<size_t>(best)] ||
          (c == d->gpuNic[i * m + static_cast<size_t>(best)] && depth > bestDepth)) {
        d->nearestNic[i] = static_cast<int>(k);
        bestDepth = depth;
      }
    }
  }
  d->nvlink.gpuGpu.assign(n * n, 0);
  d->nvlink.toSwitch.assign(n, 0);
  if (nvlinksFromDistances(topo, gpuObjs, &d->nvlink))
    d->nvlinkSource = NvlinkSource::kHwlocDistances;
}

}  // namespace

Result discoverWithHwloc(const std::string& xmlPath, TopologyData* out) {
  if (!xmlPath.empty()) TSR_CHECK(checkReadableFile(xmlPath));
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0)
    return TSR_FAIL(tsrSystemError, "hwloc_topology_init failed: %s", std::strerror(errno));
  // I/O objects are dropped by default; GPUs, NICs, NVSwitches and the bridges above them are
  // the point of loading the topology.
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (!xmlPath.empty() && hwloc_topology_set_xml(topo, xmlPath.c_str()) != 0) {
    // Never fall through to hwloc_topology_load: it would quietly describe the live machine.
    int err = errno;
    hwloc_topology_destroy(topo);
    return TSR_FAIL(tsrInvalidArgument,
                    "hwloc rejected topology file '%s' (%s): it is not a readable hwloc XML "
                    "topology; check it with HWLOC_XMLFILE='%s' lstopo-no-graphics",
                    xmlPath.c_str(), std::strerror(err), xmlPath.c_str());
  }
  if (hwloc_topology_load(topo) != 0) {
    int err = errno;
    hwloc_topology_destroy(topo);
    if (!xmlPath.empty())
      return TSR_FAIL(tsrInvalidArgument, "hwloc could not load topology file '%s': %s",
                      xmlPath.c_str(), std::strerror(err));
    return TSR_FAIL(tsrSystemError, "hwloc could not discover this machine: %s",
                    std::strerror(err));
  }
  TopologyData d;
  d.source = xmlPath.empty() ? "this machine" : xmlPath;
  describe(topo, &d);
  hwloc_topology_destroy(topo);
  *out = std::move(d);
  return tsrSuccess;
}

#endif  // TESSERA_HAVE_HWLOC

}  // namespace tessera
