# Sources of collectives/algorithms (paths relative to collectives/): the registry, the plan
# builder the families share, then one file per family.
list(APPEND TESSERA_COLLECTIVES_SOURCES
  algorithms/algorithms.cpp
  algorithms/builder.cpp
  algorithms/ring.cpp
  algorithms/tree.cpp
  algorithms/rhd.cpp
  algorithms/oneshot.cpp
  algorithms/twoshot.cpp
  algorithms/pairwise.cpp
  algorithms/hier.cpp
  algorithms/hier_ring.cpp
  algorithms/hier_chain.cpp)
