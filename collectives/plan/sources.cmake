# Sources of collectives/plan (paths relative to collectives/): the IR, its JSON form, and the
# verifier (entry, simulation, memory and checks, symbolic values).
list(APPEND TESSERA_COLLECTIVES_SOURCES
  plan/plan.cpp
  plan/plan_shape.cpp
  plan/plan_json.cpp
  plan/plan_json_read.cpp
  plan/verifier.cpp
  plan/verifier_sim.cpp
  plan/verifier_memory.cpp
  plan/verifier_values.cpp)
