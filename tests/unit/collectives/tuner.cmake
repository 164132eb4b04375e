# The tuner (collectives/tuner): filters, choice and cost model against the algorithm registry;
# TESSERA_TUNER_FILE, fromEnv and the TUNING log line.
tessera_unit_test(test_tuner SOURCES test_tuner.cpp test_tuner_model.cpp test_tuner_config.cpp)
# The measured table (tessera_tune's file), the per-host cache and the digests ranks compare.
tessera_unit_test(test_tuner_table SOURCES test_tuner_table.cpp)
