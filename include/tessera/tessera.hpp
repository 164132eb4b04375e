// C++ API: placeholder
