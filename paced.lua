function delay() return 8 end
