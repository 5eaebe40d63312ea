"""The work lifecycle: enclaves (IWM4ECRE), queue insert (IWM4QIN), select (IWM4SSL), begin and end
(IWM4STBG / IWM4STEN), delete (IWM4QDE), work records and queue-manager exits."""
