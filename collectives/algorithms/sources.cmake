# Sources of collectives/algorithms (paths relative to collectives/).
list(APPEND TESSERA_COLLECTIVES_SOURCES)
