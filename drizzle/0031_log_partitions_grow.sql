-- placeholder: filled by its change
SELECT 1;
