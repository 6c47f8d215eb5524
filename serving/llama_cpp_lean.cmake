# Included right after llama.cpp's project() when llama-cpp-python is built by `make` (CMAKE_PROJECT_llama.cpp_INCLUDE):
# llmrec loads libllama through llama-cpp-python's ctypes bindings and never uses llama.cpp's `common` library (chat
# parsers, jinja, downloads over cpp-httplib), which llama-cpp-python's CMakeLists forces on in the cache. A directory
# variable shadows that cache entry inside llama.cpp's tree, so `common` and cpp-httplib are neither built nor
# installed. libllama, ggml and ggml-cpu are built exactly as before.
set(LLAMA_BUILD_COMMON OFF)
