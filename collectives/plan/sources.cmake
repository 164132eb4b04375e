# Sources of collectives/plan (paths relative to collectives/).
list(APPEND TESSERA_COLLECTIVES_SOURCES plan/plan.cpp)
