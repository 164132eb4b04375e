// The SimGrid platform of a machine (platform.hpp says what it models): a netzone per node with
// its GPUs on split-duplex links into a switch (gpu) or one multi-core CPU host whose ranks
// signal through shared memory (cpu), and a star fabric of NICs between nodes.
#include <vector>

#include "collectives/sim/world.hpp"
#include "core/log.hpp"

namespace tessera::sim {

void buildPlatform(World& w) {
  const Machine& m = *w.m;
  sg4::NetZone* root = sg4::create_full_zone("machine");
  sg4::NetZone* fabric = nullptr;
  if (m.nodes > 1) {
    fabric = sg4::create_star_zone("fabric");
    fabric->set_parent(root);
  }
  const int per = m.ranksPerNode;
  std::vector<sg4::Host*> nics(static_cast<size_t>(m.nodes * m.nicsPerNode), nullptr);
  for (int k = 0; k < m.nodes; ++k) {
    sg4::NetZone* node = sg4::create_star_zone(strprintf("node%d", k));
    node->set_parent(root);
    if (m.kind == MachineKind::kGpu) {
      for (int i = 0; i < per; ++i) {
        Rank& r = w.ranks[static_cast<size_t>(k * per + i)];
        r.host = node->create_host(strprintf("n%d.gpu%d", k, i), kHostSpeed);
        if (per > 1) {
          sg4::Link* l = node->create_split_duplex_link(strprintf("n%d.gpu%d.nvlink", k, i),
                                                        m.intraGBs * m.intraEfficiency * 1e9)
                             ->set_latency(m.intraLatencyUs * 1e-6);
          node->add_route(r.host->get_netpoint(), nullptr, nullptr, nullptr,
                          {{l, sg4::LinkInRoute::Direction::UP}}, true);
        }
      }
    } else {
      sg4::Host* cpu = node->create_host(strprintf("n%d.cpu", k), kHostSpeed);
      cpu->set_core_count(m.cores);
      // Signals between the node's ranks: a word in shared memory, seen signalUs later.
      sg4::Link* loop = node->create_link(strprintf("n%d.shm", k), 1e15)
                            ->set_latency(m.signalUs * 1e-6)
                            ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE);
      node->add_route(cpu->get_netpoint(), cpu->get_netpoint(), nullptr, nullptr,
                      {{loop, sg4::LinkInRoute::Direction::NONE}}, false);
      for (int i = 0; i < per; ++i) w.ranks[static_cast<size_t>(k * per + i)].host = cpu;
    }
    node->seal();
    if (fabric != nullptr) {
      for (int j = 0; j < m.nicsPerNode; ++j) {
        sg4::Host* nic = fabric->create_host(strprintf("n%d.nic%d", k, j), kHostSpeed);
        sg4::Link* l =
            fabric->create_split_duplex_link(strprintf("n%d.nic%d.port", k, j), m.nicGBs * 1e9)
                ->set_latency((m.nicLatencyUs + m.fabricLatencyUs / 2) * 1e-6);
        fabric->add_route(nic->get_netpoint(), nullptr, nullptr, nullptr,
                          {{l, sg4::LinkInRoute::Direction::UP}}, true);
        nics[static_cast<size_t>(k * m.nicsPerNode + j)] = nic;
      }
    }
    for (int i = 0; i < per; ++i) {
      Rank& r = w.ranks[static_cast<size_t>(k * per + i)];
      r.node = k;
      if (fabric != nullptr)
        r.nic = nics[static_cast<size_t>(k * m.nicsPerNode + m.nicOf(k * per + i))];
    }
  }
  if (fabric != nullptr) fabric->seal();
  root->seal();
}

}  // namespace tessera::sim
