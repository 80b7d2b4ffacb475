#!/usr/bin/env node
// A committed, executable launcher: npm links it at install time, before dist/ is built.
import "../dist/main.js";
