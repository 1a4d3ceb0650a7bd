# Embeds the OpenCL C files under ROOT into TARGET, listed by ringpipe::detail::FUNCTION()
# (declare it as `std::span<const ringpipe::detail::embedded_source> FUNCTION() noexcept`).
function(ringpipe_embed_kernels target root function)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${root}/*.cl" "${root}/*.clh")
  set(output "${CMAKE_CURRENT_BINARY_DIR}/generated/${function}.cpp")
  add_custom_command(
    OUTPUT "${output}"
    COMMAND "${CMAKE_COMMAND}" -DROOT=${root} -DOUTPUT=${output} -DFUNCTION=${function}
            -P "${PROJECT_SOURCE_DIR}/cmake/embed_cl.cmake"
    DEPENDS ${sources} "${PROJECT_SOURCE_DIR}/cmake/embed_cl.cmake"
    COMMENT "Embedding OpenCL C sources of ${target}"
    VERBATIM)
  target_sources(${target} PRIVATE "${output}")
endfunction()
