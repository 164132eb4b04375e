# Sources of collectives/tuner (paths relative to collectives/).
list(APPEND TESSERA_COLLECTIVES_SOURCES)
