// Hexadecimal digits, for the readers that spell bytes in hex (IR text's dense constants, llama2.c
// byte pieces).
#pragma once

namespace orion {

// The value of hex digit c (0–9, a–f, A–F), or −1 when c is not one.
inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace orion
