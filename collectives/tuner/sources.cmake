# Sources of collectives/tuner (paths relative to collectives/): filters, cost model, parameters,
# and the tuner that ties them together.
list(APPEND TESSERA_COLLECTIVES_SOURCES
  tuner/algo_filter.cpp
  tuner/cost_inputs.cpp
  tuner/cost_model.cpp
  tuner/tuner_params_json.cpp
  tuner/tuner_table.cpp
  tuner/tuner.cpp)
