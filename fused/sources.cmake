# The checks and tile configuration every fused executor shares.
list(APPEND TESSERA_FUSED_SOURCES fused.cpp)
