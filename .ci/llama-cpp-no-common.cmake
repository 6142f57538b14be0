# Read by CMake just before llama.cpp's own project() (./dev passes it to llama-cpp-python's build as
# CMAKE_PROJECT_llama.cpp_INCLUDE_BEFORE). llama-cpp-python forces llama.cpp's `common` library on,
# but its Python package loads only libllama and libggml: `common` (the command-line tools' helpers,
# a third of the build) would be compiled, shipped and never loaded.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp common utils: not used by llama-cpp-python's package" FORCE)
