// libros2.so has no code of its own: it is ros2_client and ros2_dfs (and the
// internal libraries they use) linked whole into one shared object
// (src/libros2/CMakeLists.txt). A shared library target needs one source file.
